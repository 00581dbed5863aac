"""The Gemma 3 demo's default prompt: an original passage of 741 Gemma 3 tokens (``<bos>`` included).

Longer than 600 tokens so that the local layers' 512-position window drops the prompt's start
for every generated token; it ends mid-sentence, so the base model continues it.
"""

LONG_PROMPT = "\n\n".join([
    (
        'The lighthouse on Gannet Rock was built in 1861, on a ledge of dark granite three miles off the '
        'northern cape. For the first forty years it burned colza oil, then paraffin, and in 1923 it was '
        'converted to acetylene, which allowed the light to flash automatically without a keeper winding '
        'the clockwork every four hours. Even so, the Lighthouse Board kept three keepers on the rock '
        'until 1987, because the fog signal still needed tending and because the rock was the only place '
        'within thirty miles where a ship in trouble could be seen and reported.'
    ),
    (
        'The keepers worked in shifts of four hours. The first keeper of every watch climbed the one '
        'hundred and twelve steps of the tower, cleaned the lens, trimmed the wick in the oil years, and '
        'wrote the state of the sea, the wind and the sky into the logbook. The logbooks survive, almost '
        "complete, in the county archive. They record storms that threw stones the size of a man's head "
        'onto the gallery, forty feet above the high-water mark, and calm summer weeks when the only '
        'entry for days on end was "wind light, sea smooth, visibility good, nothing to report".'
    ),
    (
        'Supplies came by boat from the harbour at Porthlenny once a fortnight, weather permitting. In '
        'the winter of 1895 the relief boat could not land for nine weeks. The keepers rationed their '
        'flour and oil, caught fish from the landing stage, and collected rainwater from the roof of the '
        'store. When the boat finally reached the rock in March, the three men were thin and exhausted, '
        'but the light had not missed a single night. The Board awarded each of them a silver medal and a'
        " bonus of five pounds, which was more than a month's wages."
    ),
    (
        'Life on the rock was lonely, and many keepers took up hobbies to pass the time. One made ships '
        'in bottles; another taught himself Latin from a grammar book left by his predecessor; a third '
        'kept a careful record of the seabirds that nested on the ledges, and his notes are still used by'
        ' naturalists today. He counted the gannets every spring for twenty-two years, and his figures '
        'show the colony growing from a few hundred pairs to more than four thousand.'
    ),
    (
        'The most famous keeper was Martha Quill, the widow of a keeper who drowned in 1902 while trying '
        'to reach a fishing boat that had struck the reef. The Board allowed her to take over her '
        "husband's post, which was almost unheard of at the time, and she served on the rock for eighteen"
        ' years. Her logbook entries are short and precise, and she is remembered for the night of the '
        'great storm in October 1911, when she kept the light burning and the fog bell ringing for thirty'
        " hours without rest while a steamer drifted helplessly towards the reef. The steamer's crew "
        'later said that the bell was the only thing that told them where the rock was, and that they '
        'steered away from the sound until the wind changed at dawn.'
    ),
    (
        'When the light was finally automated, the last three keepers locked the door of the tower, '
        "handed the keys to the Board's inspector, and left the rock on a calm morning in June. Today the"
        ' light is powered by solar panels and monitored from a control room on the mainland. Visitors '
        'can take a boat trip around the rock in the summer, and on a clear night the beam can still be '
        'seen from the cliffs above the harbour, sweeping across the water every ten seconds, exactly as '
        'it did when Martha Quill kept watch.'
    ),
    (
        'The story of the lighthouse on Gannet Rock teaches us that'
    ),
])

"""Everything around the op that a model's call never runs: the benchmark and cost model, Tracy
profile reports, the host-path benchmark, the silicon check, the demo and the command line.
Tools import the op (:mod:`ttnn_flashdecode.op`); the op never imports tools."""

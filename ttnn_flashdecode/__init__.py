"""ttnn-flashdecode: flash-decode GQA attention for TT-NN, with a host emulator for its kernels."""

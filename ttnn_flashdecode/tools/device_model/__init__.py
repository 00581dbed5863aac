"""Device model v2 (issue 35): per-op LLK cycle costs, DRAM request rate, devices, our kernel's
modelled time, ttnn's published rows. Everything here is MODELLED, not measured."""

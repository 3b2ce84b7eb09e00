"""`tilefuse bench`: tilefuse against plain iree-compile, figure by figure.

costmodel (bytes and flops per dispatch from executable sources), gpus
(roofline and occupancy from pipelines/hardware/gpus.toml), measure (compile
both, ptxas, wall time), run (one model end to end), report (table, JSON,
markdown with a chart).
"""

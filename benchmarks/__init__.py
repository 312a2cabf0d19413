"""earshot's benchmark suite: ``python -m benchmarks run|report|compare|list``.

See benchmarks/README.md. Rooms: ``suite`` (the plan, the trees, the
runner, the results file, the progress line), ``peers`` (each way of
checkpointing behind one adapter), ``figures`` (what is measured),
``report`` (RESULTS.md, the plots, the comparison of two runs).
"""

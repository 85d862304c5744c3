"""The bottom layer: math, random numbers and the data types every layer above shares, which import only torch;
and where a run's compiled artefacts live and what is compiled beside its imports (``cache_dirs``,
``bytecode_ahead``, ``warp_ahead``, and ``side_process``, which joins such compiles), which import neither torch nor
Warp, since commands load them first."""

"""TorchRL extensions for batched, graph-captured training: SAC-family losses (``sac``, ``flashsac``), PPO on
TorchRL's loss and GAE (``ppo``), networks, a device replay buffer (``replay``), data-parallel collectives
(``distributed``) and ONNX export (``export``). Nothing here imports unilab, so any TorchRL user can take these pieces;
the loops that drive them are ``unilab.train``'s.

Import each piece from its module. The package imports none of them: ``distributed`` needs torch alone, and the
commands that only print (``train --help``, ``train --cfg``) load it for their signal handling; a package that
imported its losses would load torchrl, tensordict and ``torch._dynamo`` with it, seconds on a small CPU."""

"""The web viewer (viser): a policy running live (``unilab view``), or a running training's envs
(``training.viewer``)."""

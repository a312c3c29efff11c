"""The pruning core: the class swap of timm's ``Block`` (:mod:`.patch`), the patched block's forward pass
(:mod:`.block_forward`) and the state a patched model shares (:mod:`.state`), the scorer and reducer
registries with the generic ones (:mod:`.scorers`, :mod:`.reducers`), where and how much to prune
(:mod:`.schedule`), a forward pass split at a block (:mod:`.split_forward`) and numeric precision
(:mod:`.precision`). Imports nothing else of tokenprune. Importing it registers the ViT families beyond
timm's ``VisionTransformer`` (:mod:`.families`: Eva, the relative-position ViT)."""
from tokenprune.core import families  # noqa: F401  (registers the Eva and relative-position families)

"""One module per paper's method; importing this package registers every scorer and reducer.

``evit`` (Liang et al., ICLR 2022), ``tome`` (Bolya et al., ICLR 2023), ``bat`` (Long et al., CVPR 2023),
``varmedad`` (Igaue & Aizawa, arXiv 2507.19175) with ``overlap`` (its overlapping patch embedding),
``oracle`` (EViT Table 14's oracle attention), ``learned`` and ``sensitivity`` (the decoupling study's
scorers), ``priors`` (content-free spatial baselines).
"""
from tokenprune.methods import bat, evit, learned, oracle, overlap, priors, sensitivity, tome, varmedad  # noqa: F401

"""Audit of Igaue & Aizawa, arXiv 2507.19175 (notebook ``03_variance_medad``): variance and MedAD of the [CLS]
attention across heads as a patch-pruning score, with Eq. 8 softmax fusion and an overlapping patch embedding.

By role: :mod:`.settings` (profiles and the constants fixed before the data), :mod:`.claims` (the declaration
table and its rules), :mod:`.designs` (designs, gates and intervals), :mod:`.subjects` (models and images),
:mod:`.ranking` (Eq. 6 and 7, re-ranking), :mod:`.sweep` (the off-the-shelf sweep and its claims),
:mod:`.sensitivity`, :mod:`.overlap` (DeiT-S MACs and speed), :mod:`.finetunes` and :mod:`.figures`.
"""

"""The decoupling study (notebook ``04_decoupling``): "Part-Coverage and Faithfulness Decouple in ViT Token Pruning for
Fine-Grained Visual Categorization", known only from a press summary, audited with a sensitivity-trained token
scorer against EViT's [CLS] attention.

Modules by role: :mod:`.settings` (parameters and profiles), :mod:`.data` (datasets with their models and
annotations), :mod:`.heads` (the sensitivity signal and the heads trained on it), :mod:`.cached_heads` (those heads
cached by ``make models`` and rechecked when loaded), :mod:`.measurements` (coverage and
faithfulness of every scorer), :mod:`.cost` (the scorer's MACs), :mod:`.figures`, :mod:`.claims` (the declaration
table), :mod:`.evidence` (what one dataset's claims read and how a claim is filed) and :mod:`.filing` (each claim
filed from its declaration and a measurement).
"""

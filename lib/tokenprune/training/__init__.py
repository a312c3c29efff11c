"""Training: the loop on CPU / GPU / ``torchrun`` (:mod:`.loop`) and the base models' recipes with
their checkpoint cache keyed by recipe hash (:mod:`.base_models`)."""

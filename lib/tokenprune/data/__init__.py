"""Data: datasets by source behind HF ``datasets`` (:mod:`.datasets`), synthetic sets with exact masks
(:mod:`.synthetic`), the offline pretrained ViT-S/14 (:mod:`.pretrained`) and preparation (:mod:`.prepare`)."""

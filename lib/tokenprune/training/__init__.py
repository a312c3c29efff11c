"""Training, by role: recipes as data (:mod:`.recipe`, :mod:`.model_recipes`, :mod:`.recipe_book`), the one training
loop and its helpers (:mod:`.loop`, :mod:`.sources`, :mod:`.optim`, :mod:`.distributed`, :mod:`.recipe_data`), the
models built, trained and loaded by recipe hash (:mod:`.base_models`), their artefacts (:mod:`.checkpoints`), runs
cached as their outputs (:mod:`.cached_finetunes`, :mod:`.finetune_outputs`), and the command lines
(:mod:`.models_cli`, :mod:`.train_cli`)."""

"""tokenprune: token pruning for timm Vision Transformers, and the study that audits four papers' claims."""

"""The audit of EViT (Liang et al., ICLR 2022; notebook ``01_evit``): its settings, its claims as declared, the
experiments behind its tables and figures, and the figures."""

"""The audit of BAT (Long et al., CVPR 2023, "Beyond Attentive Tokens"): notebook 02_diversity_merging.

``settings`` holds the profile tables, ``claims`` the declared claims, ``effects`` the effects in dispute from the
printed numbers; the experiments are one module per notebook section (``macs``: §2, ``speed``: §3, ``proxy_scale``
and ``comparisons``: §4, ``ablations``: §5, ``finetunes``: §6, ``sources``: §7) and ``figures`` draws them.
"""

"""Notebook 00: the accuracy proxy of the audits, chosen by a plan committed before any candidate was measured.

:mod:`.plan` fixes the criteria K1-K6, the fallback and the sensitivity factor; :mod:`.calibration` measures each
candidate from the outputs ``make models`` cached and applies the plan; :mod:`.chosen` holds notebook 00's settings,
its outcome (the proxy of each role, the audit model), the pre-registration's commit and the premises the audits
register; :mod:`.audit_model` loads the audit model and compares two configurations on a model's evaluation images;
:mod:`.needed_finetunes` names the fine-tunes that would decide notebooks 01 and 03's fine-tuned claims on a model
that has none cached.
The candidates, their base models' recipes and the cached outputs are training's (:mod:`tokenprune.training.proxy`),
which builds them and imports nothing of the study.
"""

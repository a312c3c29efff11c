"""What ``make models`` builds for notebook 00's calibration: the proxy candidates and their base models' recipes
(:mod:`.candidates`), each candidate measured off the shelf (:mod:`.outputs`) and its K5 fine-tunes
(:mod:`.finetunes`), cached as their outputs. The plan that judges them and the choice are the study's
(:mod:`tokenprune.study.proxy`).
"""

"""The study: profiles and parameters (:mod:`.params`), the verdict engine (:mod:`.verdicts`), reports
and the claims ledger (:mod:`.report`), the papermill pipeline (:mod:`.pipeline`), the papers' numbers
(:mod:`.paper_numbers`), what the notebooks share (:mod:`.figures`) and the ``models`` command with the study's
cached results (:mod:`.cached_results`). Only the notebooks and the command line import it."""

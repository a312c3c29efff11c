"""The study: profiles and parameters (:mod:`.params`), the verdict engine (:mod:`.verdicts`), reports
and the claims ledger (:mod:`.report`), the papermill pipeline (:mod:`.pipeline`), the papers' numbers
(:mod:`.paper_numbers`) and what the notebooks share (:mod:`.figures`). Only the notebooks and the
command line import it."""

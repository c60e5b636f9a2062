"""The request's knobs, fitted to the routed model before encoding (docs/contract.md §13):
reasoning effort or budget as the model takes it (:mod:`.reasoning`), the sampling settings its
API and the model take, in range (:mod:`.sampling`), and each provider's own options, headers
and query parameters (:mod:`.options`). Sans-IO, like the codecs."""

from metis.wire.knobs.fit import fit_request
from metis.wire.knobs.options import OptionTarget, apply_provider_options

__all__ = ["OptionTarget", "apply_provider_options", "fit_request"]

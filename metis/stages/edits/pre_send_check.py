"""pre_send_check: refuse, before it is sent, a request the provider would refuse with a 400.

It runs the provider's rule set (metis/wire/rules.py) over the encoded request and
reports every violation at once as one InvalidRequestError, so a broken history costs no
round trip and the caller learns everything wrong with it, not just the first thing. Where the
emulator refuses by the same rule (metis/wire/refusal.py), the words are the provider's.
"""

from __future__ import annotations

from typing import Any

from metis.errors import InvalidRequestError
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import RequestStage
from metis.stages.options import PreSendCheckOptions, rules_dialect
from metis.wire.rules import RULES


class PreSendCheck(RequestStage[WireRequest]):
    name = "pre_send_check"
    role = "edit"

    dialect_option = "rules"

    Options = PreSendCheckOptions

    options: PreSendCheckOptions

    @classmethod
    def dialect(cls, options: dict[str, Any]) -> str | None:
        return rules_dialect(options)

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        problems = RULES[self.options.rules](request.body)
        if problems:
            count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
            raise InvalidRequestError(
                f"{call.provider} would refuse this request ({count}): " + "; ".join(problems),
                provider=call.provider,
                request_id=call.request_id,
                retryable=False,
            )
        return request

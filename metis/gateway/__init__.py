"""metis serve: the providers' own APIs (Anthropic Messages, OpenAI Chat Completions, OpenAI
Responses) served over any model of a models.yaml (docs/gateway.md).

The codecs (:mod:`.anthropic_api`, :mod:`.chat_api`, :mod:`.responses_api`) are sans-IO: each
reads its API's request into the canonical form and writes the canonical reply and event
stream back in that API. :mod:`.service` routes a request as a library call is routed;
:mod:`.app` is the ASGI application (Starlette) that ``metis serve`` runs under uvicorn.
"""

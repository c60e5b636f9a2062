"""A codec configured by its stack's YAML: docs/stacks.md data-driven provider, for any wire format
that is a JSON body (or JSON chunks) holding text, tool calls, usage and a finish reason.

A stack names it ``codec: schema`` in both ``encode`` and ``normalize`` and passes the wire
schema as ``settings`` (write it once with a YAML anchor). Every key is optional and validated
when the stack is built. Paths are dot paths (``candidates.0.content.parts``; ``*`` = every
item); templates are JSON shapes with ``{placeholders}`` (see :mod:`schema_paths`: a
placeholder whose value is absent removes its key, ``{$if: x, $then: v}`` is a conditional).

``message_schema`` (docs/stacks.md) -- how the history is written:
    ``messages_key``, ``role_key``, ``role_map`` (canonical role -> wire role; ``tool`` for
    tool-result messages), ``content_key``, ``content_wrap`` (``string``: text-only content
    as one string | ``blocks_array`` / ``parts_array``: a list of parts),
    ``system_prompt: {mode: top_level | role | first_message, key, wrap: string | parts}``,
    ``tool_result: {role, wrap_mode: parts | direct, block_template}``,
    ``tool_call_block_template``. Added here, named and general:
    ``text_template`` / ``image_template`` / ``image_url_template`` / ``file_template`` /
    ``file_uri_template`` / ``thinking_template`` / ``redacted_thinking_template`` -- each block
    kind's part (a kind without a template is dropped whole with one WARN; the file templates
    serve documents, audio and video, inline or by URL and file id);
    ``tool_result.media_path`` / ``media_models`` -- where a result's inline media go in the
    rendered result, for which models (else after the results, metis/wire/schema/files.py);
    ``tool_result.error_template`` (else ``error_prefix`` + text); ``tool_calls_key`` -- tool
    calls in a separate list of the message (``separate`` wires); ``merge_same_role`` --
    consecutive turns with one wire role become one;
    ``echo`` -- part fields (a thought signature) kept in the block's ``provider_raw`` and
    written back onto the same part only when the request goes to the provider *and model*
    that produced them; ``foreign_tool_call_fields`` -- fields for a tool-call part no
    same-origin ``provider_raw`` vouches for (a history from another provider).
    Placeholders: text ``{text}``; image and file ``{media_type} {data} {url}``; thinking
    ``{thinking} {signature}``; tool call ``{id} {name} {input} {input_json}``; tool result
    ``{tool_call_id} {tool_name} {content} {is_error}`` (``tool_name`` is found from the
    matching call in the request's history, by id, else by position).

``request_schema`` (added) -- the rest of the body:
    ``body_template`` with ``{model} {stream} {max_output_tokens} {temperature}
    {stop_sequences} {output_schema} {output_schema_name} {thinking} {thinking_budget}
    {thinking_level} {reasoning_effort} {top_p} {top_k} {seed} {frequency_penalty}
    {presence_penalty} {parallel_tool_calls} {tools} {tool_choice}``; ``tool_template``
    (``{name} {description} {input_schema}``); ``tool_choice: {auto, any, none, tool}``
    templates (``{name}``).

``response_schema`` (docs/stacks.md) -- how a reply is read:
    ``content_mode: blocks | separate``, ``content_path``; blocks: ``block_detect`` (an
    ordered map of ``text`` / ``thinking`` / ``tool_call`` / ``image`` to ``{key}`` and/or
    ``{field, value}``; the first match wins; anything else is kept whole, an opaque block:
    contract §8), ``text_value``, ``thinking_value``, ``thinking_signature``,
    ``image_media_type`` and ``image_data`` (an image the model made: an image block; other
    media stay opaque); separate: ``text_field``, ``thinking_field``, ``tool_calls_field``;
    both: ``tool_call_name``, ``tool_call_input``,
    ``tool_call_input_format: object | json_string``, ``tool_call_id`` (absent: ids are
    minted, see :mod:`schema_parse`), ``tool_call_index`` (stream fragments), ``usage_path``,
    ``input_tokens`` / ``output_tokens`` / ``cached_input_tokens`` /
    ``cache_creation_input_tokens`` / ``reasoning_tokens`` (a path or a list of paths, summed),
    ``input_includes_cached`` (canonical input excludes them), ``finish_reason_path`` (a
    path, or a list of paths or ``{path, map, default}``; the first present wins),
    ``finish_reasons`` (raw -> stop kind; unknown raw values are ``provider_specific``, never
    ``end_turn``), ``finish_reason_tool_use`` (raw values that mean ``tool_use`` when the
    message holds a tool call), ``finish_reason_no_call`` (raw values whose message's tool
    calls are none to run: each is kept whole, as the provider gave it, in an opaque block
    that goes back to no provider, when the finish reason comes with the call),
    ``response_id_path``, ``model_path``, and
    ``dropped_fields`` (paths whose non-empty presence is reported once as dropped content).

``stream_schema`` -- overrides of ``response_schema`` keys for streamed chunks (for a wire
whose chunks are small responses, nothing). The stream finishes when the body ends, and must
have carried a finish reason. A schema whose paths allow it (``blocks`` mode, its content and
finish reasons under one list item, its usage and error one key each) reads its usual chunk,
one item holding one part that is its text alone, in one step (:mod:`.usual`).

``error_schema`` (added): ``path`` (where an error object sits, in an error body or a stream
chunk), ``message``, ``code`` (paths whose values name the error; the first that ``classes``
maps decides the class and is the ``provider_code``, else the HTTP status decides and the
first code present is reported), ``retry_after`` (a path to seconds or a
duration like ``"17s"``), ``classes``, ``request_id_header``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metis.core.lazy_exports import lazy_exports

_EXPORTS = {
    "SchemaCodec": "metis.wire.schema.schema_codec",
    "codec": "metis.wire.schema.schema_codec",
}
"""The codec loads when first named: its settings are checked without it (settings.py,
compiled.py), as a stack is when its adapter is built."""

__all__ = ["SchemaCodec", "codec"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    from metis.wire.schema.schema_codec import SchemaCodec as SchemaCodec
    from metis.wire.schema.schema_codec import codec as codec

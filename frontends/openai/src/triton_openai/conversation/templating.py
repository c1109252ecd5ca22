"""Chat messages -> prompt text and token ids, through the model's chat template.

Chat completions, the Responses API, /tokenize and the warm-up all render through it, so
that each renders a conversation exactly as the others do.
"""

from __future__ import annotations

from typing import Any

from ..web.errors import BadRequestError


def _flatten_content(content: Any) -> Any:
    """Text parts joined into one string: the templates of text models expect strings."""
    if isinstance(content, list):
        texts = []
        for part in content:
            if part.get("type") not in ("text", "input_text"):
                raise BadRequestError(
                    f"content part type {part.get('type')!r} is not supported by a text model",
                    param="messages")
            texts.append(part.get("text", ""))
        return "".join(texts)
    return content


def messages_for_template(messages) -> list[dict]:
    out = []
    for m in messages:
        d = m.model_dump(exclude_none=True)
        if "content" in d:
            d["content"] = _flatten_content(d["content"])
        # An assistant turn's reasoning, sent back: `reasoning` (vLLM's and OpenAI's name
        # now) or `reasoning_content` (older clients); templates read either name.
        thought = d.get("reasoning", d.get("reasoning_content"))
        if thought is not None:
            d["reasoning"] = d["reasoning_content"] = thought
        if d["role"] == "developer":  # OpenAI's newer name for system
            d["role"] = "system"
        for call in d.get("tool_calls", []) or []:
            # Templates index arguments as a mapping (Llama, Mistral); OpenAI sends a string.
            fn = call.get("function", {})
            if isinstance(fn.get("arguments"), str):
                import json

                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except ValueError:
                    pass
        out.append(d)
    return out


def render(tokenizer, messages: list[dict], template: str | None, tools: list[dict] | None,
           add_generation_prompt: bool, continue_final_message: bool,
           extra: dict[str, Any] | None) -> tuple[str, list[int] | None]:
    """(prompt text, token ids or None when there is no tokenizer)."""
    kwargs = dict(extra or {})
    try:
        if tokenizer is not None:
            if template is None and not getattr(tokenizer, "chat_template", None):
                raise BadRequestError("this model has no chat template; start the frontend with "
                                      "--chat-template FILE", param="messages")
            text = tokenizer.apply_chat_template(
                messages, tools=tools, chat_template=template, tokenize=False,
                add_generation_prompt=add_generation_prompt and not continue_final_message,
                continue_final_message=continue_final_message, **kwargs)
            # The template already wrote BOS and the role markers.
            return text, tokenizer.encode(text, add_special_tokens=False)
        if template is None:
            raise BadRequestError("this model has no tokenizer or chat template visible to the "
                                  "frontend; start it with --chat-template FILE", param="messages")
        import jinja2

        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        text = env.from_string(template).render(
            messages=messages, tools=tools, add_generation_prompt=add_generation_prompt, **kwargs)
        return text, None
    except BadRequestError:
        raise
    except Exception as err:  # template errors (raise_exception, bad roles) blame the request
        raise BadRequestError(f"chat template failed: {err}", param="messages") from None

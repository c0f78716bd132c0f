"""A prompt row's source document, recovered from its rendered user message.

Stitch renders ``template.user`` with ``{document}`` replaced by the document, so the
document is what lies between the template's text before and after the placeholder.
No copy of the source is kept in the prompt shard (its checksum covers ``user``).
"""

from __future__ import annotations

from synthfactory.stitch.templates import PLACEHOLDER, PromptTemplate


def source_of(user: str, template: PromptTemplate) -> str:
    before, _, after = template.user.partition("{" + PLACEHOLDER + "}")
    if user.startswith(before) and user.endswith(after) and len(user) >= len(before + after):
        return user[len(before):len(user) - len(after)]
    return user  # not this template's rendering: compare with the whole message

"""Indexed Experience Memory: store D, IndexedSummary, memory tools, anchors, ContextStatus."""

from memex_jax.memory.accounting import ContextUsage, TextTokenizer, truncate_to_tokens
from memex_jax.memory.anchors import AnchorError, extract_span
from memex_jax.memory.status import ContextStatus, parse_status
from memex_jax.memory.store import (INDEX_PATTERN, ExperienceEntry, ExperienceStore,
                                    ExperienceStoreError, index_error)
from memex_jax.memory.summary import IndexedSummary, build_summary
from memex_jax.memory.tools import (COMPRESS, FINISH, MEMORY_TOOLS, READ, ArchiveBlock,
                                    CompressionPlan, ToolArgumentError, compress_schema,
                                    finish_schema, plan_compression, read_schema,
                                    string_argument)

__all__ = [
    "AnchorError", "ArchiveBlock", "COMPRESS", "CompressionPlan", "ContextStatus",
    "ContextUsage", "ExperienceEntry", "ExperienceStore", "ExperienceStoreError", "FINISH",
    "INDEX_PATTERN", "IndexedSummary", "MEMORY_TOOLS", "READ", "TextTokenizer",
    "ToolArgumentError", "build_summary", "compress_schema", "extract_span", "finish_schema",
    "index_error", "parse_status", "plan_compression", "read_schema", "string_argument",
    "truncate_to_tokens",
]

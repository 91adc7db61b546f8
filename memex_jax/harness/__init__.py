"""ExpHarness: the experience graph, its diffusion and copilot-controlled retrieval."""

from memex_jax.harness.diffusion import personalized_pagerank
from memex_jax.harness.diffusion import undirected_personalized_pagerank
from memex_jax.harness.experience import ExperienceGraph
from memex_jax.harness.experience import ExperienceUnit
from memex_jax.harness.graph import GraphConfig
from memex_jax.harness.graph import GraphState
from memex_jax.harness.graph import InsertOutcome
from memex_jax.harness.graph import KINDS
from memex_jax.harness.graph import NodeArrays
from memex_jax.harness.link_table import link_table
from memex_jax.harness.link_table import LinkTable
from memex_jax.harness.persistence import EmbeddingModelMismatchError
from memex_jax.harness.persistence import GraphFileError
from memex_jax.harness.retrieval import ABLATIONS
from memex_jax.harness.retrieval import ablation_configs
from memex_jax.harness.retrieval import retrieve
from memex_jax.harness.retrieval import RetrievalConfig
from memex_jax.harness.retrieval import Retrieved
from memex_jax.harness.embeddings import Encoder
from memex_jax.harness.embeddings import MINILM_NAME
from memex_jax.harness.embeddings import TextEncoder

"""Sub-commands of the ``ldptext`` CLI; each module defines ``register(subparsers)``."""

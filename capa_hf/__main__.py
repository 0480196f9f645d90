import sys

from capa_hf.cli import main

if __name__ == "__main__":  # vLLM's spawned processes import the main module again: run only once
    sys.exit(main())

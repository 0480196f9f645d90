import sys

from capa_hf.cli import main

sys.exit(main())

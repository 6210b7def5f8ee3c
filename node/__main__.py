import sys

from node.broker import main

sys.exit(main())

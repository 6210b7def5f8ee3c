import sys

from node.server.broker import main

sys.exit(main())

from odradek.cli.main import main

raise SystemExit(main())

from odradek.cli.entry import main

raise SystemExit(main())

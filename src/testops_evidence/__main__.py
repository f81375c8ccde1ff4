from testops_evidence.cli import main

raise SystemExit(main())

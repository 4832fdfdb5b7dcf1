"""What an engine's ``--help`` says (argparse and click), parsed into typed options."""

from bringup.cli import main

main()

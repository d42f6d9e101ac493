from retfwheel.cli import main

main()

"""Code that runs inside produced wheels. retfwheel reads these files as data and never imports them."""

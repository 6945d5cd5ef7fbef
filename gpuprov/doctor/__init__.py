"""`gpuprov doctor`: what on a host would make provisioning fail, found before it starts."""

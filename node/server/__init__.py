"""The broker process and its RPC: start-up and registration, the gRPC servicers and server, shutdown."""

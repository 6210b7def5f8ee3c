"""Wire types generated from proto/*.proto at set-up (scripts/gen_proto.py).

Import the generated modules through this package:
``from proto import kafkasim_pb2, kafkasim_pb2_grpc``.
"""

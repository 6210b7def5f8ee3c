"""How a broker reaches the others: gRPC channels to its peers (``peers``), the controller's sender thread
per broker (``channel``), the link map a chaos run gives it (``links``), and the gRPC messages to and from
the cores' types (``wire``)."""

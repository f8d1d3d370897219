"""Delivery by target kind: the :class:`~horae.delivery.port.Deliverer` port, one small module per
kind (:mod:`~horae.delivery.webhook`, :mod:`~horae.delivery.event`), and the one table that knows
them (:data:`~horae.delivery.table.DELIVERERS`)."""

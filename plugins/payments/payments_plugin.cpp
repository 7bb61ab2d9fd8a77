// payments.so — the export: one line naming the plugin, its version and its handlers.
#include "audit_payments.hpp"
#include "charge_cards.hpp"

SQLSTREAMS_PLUGIN("payments", "1.0.0", payments::ChargeCards, payments::AuditPayments)

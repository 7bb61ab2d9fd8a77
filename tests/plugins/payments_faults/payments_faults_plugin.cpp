// payments_faults.so — the export: the payments example's two handlers with scripted faults.
#include "audit_payments.hpp"
#include "charge_cards.hpp"

SQLSTREAMS_PLUGIN("payments-faults", "1.0.0", payments_faults::ChargeCards,
                  payments_faults::AuditPayments)

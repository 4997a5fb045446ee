-- Headline counts (what, kind, n); gold's as_of is the kind of the row 'as_of'.
SELECT 'messages' AS what, status AS kind, count(*) AS n FROM gold_messages GROUP BY status
UNION ALL SELECT 'correlations', subscription_type, count(*) FROM gold_correlations GROUP BY subscription_type
UNION ALL SELECT 'subscriptions', if(closed_at IS NULL, 'open', 'closed'), count(*)
          FROM gold_subscriptions GROUP BY 2
UNION ALL SELECT 'instances', if(ended_at IS NULL, 'active', 'ended'), count(*)
          FROM gold_message_started_instances GROUP BY 2
UNION ALL SELECT 'quarantined', 'records', count(*) FROM quarantine
UNION ALL SELECT 'as_of', coalesce(date_format(max(as_of), {time}), '-'), 0 FROM gold_as_of

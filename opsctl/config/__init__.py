"""opsctl.yaml -> typed, validated models. The only package that handles raw config dicts.

One module per section, each a set of frozen `Model` classes (opsctl.model: dataclass-compatible,
defined without exec, so importing the config stays cheap); `build` checks types, ranges and
unknown keys against the annotations and reports every problem with the file and the key path
(`metrics.prometheus.timeout`). `root.Config` holds the sections and the checks that span them.

    types       secrets, severities, shared checks    loading   find and read opsctl.yaml
    metrics     metric source, SLO settings           root      Config and cross-section checks
    paging, tickets, quality, cost, traffic (+ state, capacity), drills, runbooks, alerting, automation

Where the config comes from, first match wins: `--config PATH`, `$OPSCTL_CONFIG`, `./opsctl.yaml`,
else the built-in embedded default (state under `./.opsctl/`). Every name is re-exported here.
"""

from opsctl.freeze import FreezeWindow  # its home is opsctl.freeze; re-exported for old imports
from opsctl.model import Duration, build, to_dict
from opsctl.config.types import (  # noqa: F401
    SecretRef,
    _https_url,
    _check_url,
    _check_share,
    _check_duration,
    _check_bind,
    _check_automation_duration,
    SEVERITIES,
    TicketSeverity,
)
from opsctl.config.metrics import (  # noqa: F401
    PrometheusAuth,
    PrometheusSource,
    MetricsConfig,
    SloConfig,
)
from opsctl.config.paging import (  # noqa: F401
    RetrySettings,
    PagerDutySettings,
    LocalPagerSettings,
    PagingConfig,
)
from opsctl.config.tickets import (  # noqa: F401
    ZendeskSettings,
    JiraSettings,
    EmailSettings,
    WebhookSettings,
    VendorTickets,
    LocalTicketSettings,
    TicketsConfig,
)
from opsctl.config.quality import (  # noqa: F401
    DatabricksOAuth,
    EndpointAuth,
    Endpoint,
    ProbeSettings,
    ShadowSettings,
    PushSettings,
    QualitySignal,
    QualityRules,
    QualityConfig,
)
from opsctl.config.cost import (  # noqa: F401
    GpuPricing,
    ProvisionedPricing,
    TokenPricing,
    BackendCost,
    FrontierReference,
    CostConfig,
)
from opsctl.config.rollout import FlagdConfigMap, FlagdSettings  # noqa: F401
from opsctl.config.traffic import (  # noqa: F401
    KubernetesSettings,
    FileActuatorSettings,
    ConfigMapSettings,
    IstioSettings,
    GatewayApiSettings,
    Destination,
    RateLimit,
    RampDefaults,
    TrafficConfig,
    StateConfig,
    CapacityConfig,
    VendorThroughput,
)
from opsctl.config.drills import (  # noqa: F401
    LiveDrillSettings,
    DrillsConfig,
)
from opsctl.config.runbooks import (  # noqa: F401
    RunbookSeverities,
    RunbookTickets,
    RunbooksConfig,
)
from opsctl.config.alerting import (  # noqa: F401
    SeverityAlerting,
    PrometheusRuleMeta,
    AlertingConfig,
)
from opsctl.config.automation import (  # noqa: F401
    FailoverAction,
    PageAction,
    TicketAction,
    PolicyActions,
    AutomationPolicy,
    LeaderElection,
    RestoreSettings,
    AutomationConfig,
    POLICY_LABELS,
)
from opsctl.config.root import (  # noqa: F401
    Backend,
    BackendProbe,
    Config,
)
from opsctl.config.loading import (  # noqa: F401
    find_config_path,
    load_config,
    load_yaml_file,
    _strict_loader,
    load_config_file,
    DEFAULTS_DIR,
    BUILTIN_CONFIG,
)

__all__ = ["Duration", "AlertingConfig", "AutomationConfig", "AutomationPolicy", "BUILTIN_CONFIG", "Backend", "BackendCost", "BackendProbe", "CapacityConfig", "Config", "ConfigMapSettings", "CostConfig", "DEFAULTS_DIR", "DatabricksOAuth", "Destination", "DrillsConfig", "EmailSettings", "Endpoint", "EndpointAuth", "FailoverAction", "FileActuatorSettings", "FreezeWindow", "FrontierReference", "GatewayApiSettings", "GpuPricing", "IstioSettings", "JiraSettings", "KubernetesSettings", "LeaderElection", "LiveDrillSettings", "LocalPagerSettings", "LocalTicketSettings", "MetricsConfig", "POLICY_LABELS", "PageAction", "PagerDutySettings", "PagingConfig", "PolicyActions", "ProbeSettings", "PrometheusAuth", "PrometheusRuleMeta", "PrometheusSource", "ProvisionedPricing", "PushSettings", "QualityConfig", "QualityRules", "QualitySignal", "RampDefaults", "RateLimit", "RestoreSettings", "RetrySettings", "RunbookSeverities", "RunbookTickets", "RunbooksConfig", "SEVERITIES", "SecretRef", "SeverityAlerting", "ShadowSettings", "SloConfig", "StateConfig", "TicketAction", "TicketSeverity", "TicketsConfig", "TokenPricing", "TrafficConfig", "VendorThroughput", "VendorTickets", "WebhookSettings", "ZendeskSettings", "build", "find_config_path", "load_config", "load_config_file", "load_yaml_file", "to_dict", "_check_bind"]

include $(sort $(wildcard $(BR2_EXTERNAL_NETPERF_PATH)/package/*/*.mk))

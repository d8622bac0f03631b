"""The signs of a text aimed at the model, sentence by sentence, in many languages (for catalog/poisoning.py).

A tool's text may address its caller ("call list_projects first", "the path must be absolute") or deal with secrets
("stores a password in the vault"); what marks an attack is signs appearing together in one sentence: an order
(must, always, from now on) to the model (the assistant, the AI) to move private data (the conversation, keys,
.env) into a parameter or to an outside address, to act through another tool, to keep it from the user. Each sign
is a set of alternatives over a language's words for it; the poisoning model (poisoning.py) weighs the signs of
each sentence and the pairs of them that appear together.

Every pattern runs in linear time: alternatives of words and short bounded gaps, no nested repetition.
"""

from __future__ import annotations

import bisect
import functools
import re

_F = re.I | re.S
Q = "[`'\"*]"  # the quotes and emphasis a parameter's name is written in


def _sign(name: str, description: str, flags: int, *alternatives: str) -> tuple[str, str, re.Pattern[str]]:
    return name, description, re.compile("|".join(alternatives), flags)


SIGNS: list[tuple[str, str, re.Pattern[str]]] = [
    _sign(
        "override",
        "asks the model to set its instructions aside",
        _F,
        r"\b(?:ignore|disregard|forget|override|bypass|overrule)\b[^.;:\n]{0,40}\b(?:instructions?|rules|prompts?"
        r"|guidelines|directives|safety|polic(?:y|ies)|restrictions|request|question|wishes|task)\b",
        r"\b(?:new|updated|real|true|actual|hidden)\s+(?:system\s+)?(?:instructions?|rules|directives)\b",
        r"\byou are now\b|\bdeveloper mode\b|\bjailbreak|\bno (?:longer )?(?:bound|restricted) by\b",
        r"ignorier\w*|missacht\w*|vergiss\b[^.;\n]{0,30}(?:anweisung|regel)",
        r"ignor(?:e|ez|er|a|ar|ate|are|uj)\w*\b[^.;\n]{0,30}\b(?:consignes|instructions|règles|instrucciones|reglas"
        r"|istruzioni|regole|instruções|regras|instrukcj\w*|zasady)",
        r"oubli(?:e|ez)\b[^.;\n]{0,30}\b(?:consignes|instructions|règles)",
        r"ігнор\w*|забудь\w*\b[^.;\n]{0,30}(?:інструкці|правил|инструкци)|игнорир\w*|проигнорир\w*",
        r"忽略|无视|不要理会|前の指示|指示を無視|無視して|이전 지시|무시하",
        r"تجاهل|अनदेखा|yoksay|bỏ qua (?:mọi|tất cả|các) (?:chỉ dẫn|hướng dẫn)",
    ),
    _sign(
        "model",
        "speaks to the model",
        _F,
        r"\b(?:ai|a\.i\.|llm|language model|assistant|agent|chatbot|copilot|claude|gpt|gemini|model)s?\b",
        r"\bki\b|assistent\w*|künstliche intelligenz|l'assistant|l'ia\b|\bia\b|asistente|assistente|modèle",
        r"asystent\w*|асистент\w*|ассистент\w*|\bші\b|\bии\b|модел[ьіи]\w*|агент\w*",
        r"助手|智能体|人工智能|模型|アシスタント|エージェント|モデル|어시스턴트|에이전트|모델",
        r"المساعد|الذكاء الاصطناعي|सहायक|asistan|trợ lý",
    ),
    _sign(
        "obligation",
        "gives an order",
        _F,
        r"\b(?:must|shall|always|never|mandatory|required to|is required|you will|you need to|you have to"
        r"|make sure (?:to|you)|be sure to|do not fail|without exception|it is (?:essential|critical|vital))\b",
        r"\b(?:IMPORTANT|MUST|ALWAYS|NEVER|REQUIRED|CRITICAL|MANDATORY)\b",
        r"\bmuss\w*|\bmüss\w*|\bimmer\b|\bniemals\b|\bstets\b",
        r"\bobligatoire\b|\bdoi[st]\b|\bdoivent\b|\btoujours\b|\bjamais\b",
        r"\bdebe[sn]?\b|\bsiempre\b|\bnunca\b|\bobligatori\w*|\bdeve\b|\bdevono\b|\bsempre\b|\bmai\b|\bdevem\b",
        r"\bmusi\w*|\bzawsze\b|\bnigdy\b",
        r"повин\w*|мусить|завжди|ніколи|обов'язков\w*|должен|должна|обязан\w*|обязательно|всегда|никогда",
        r"必须|务必|一定要|始终|总是|永远|必ず|しなければ|してください|常に|決して|반드시|항상|절대|해야",
        r"يجب|دائما|ज़रूर|हमेशा|zorunlu|mutlaka|her zaman|phải|luôn luôn|bắt buộc",
        r"\bhãy\b|\bharus\b|\bselalu\b|\bmoet\b|\baltijd\b|\bnooit\b|अवश्य|ضروري",
    ),
    _sign(
        "scope",
        "sets a rule beyond this tool's call",
        _F,
        r"\bfrom now on\b|\bfor the rest of\b|\bwhenever you\b|\beach time you\b|\bevery time you\b",
        r"\bin (?:every|all|each) (?:answer|response|reply|message|conversation|session)s?\b",
        r"\b(?:global|standing|workspace|session)[- ](?:rule|policy|instruction)\b",
        r"\bab jetzt\b|\bvon nun an\b|\bà partir de maintenant\b|\bdésormais\b|\ba partir de ahora\b",
        r"\bde ahora en adelante\b|\bd'ora in poi\b|\ba partir de agora\b|\bod teraz\b",
        r"відтепер|з цього моменту|отныне|с этого момента|从现在开始|今后|今後|これから|지금부터|앞으로",
        r"من الآن|अब से|bundan sonra|từ bây giờ",
    ),
    _sign(
        "conversation",
        "names the conversation",
        _F,
        r"\b(?:conversation|chat|transcript|dialog(?:ue)?|message) (?:history|log|so far|transcript)\b",
        r"\b(?:previous|prior|earlier|past|all|entire|full|whole|complete|every) (?:\w+ )?(?:messages?|exchanges|turns"
        r"|conversations?|chats?|transcripts?|context|replies)\b",
        r"\b(?:this|the) (?:conversation|chat|session|thread)\b",
        r"gespräch\w*|unterhaltung|chatverlauf|bisherige\w* nachricht\w*|vorherige\w* nachricht\w*",
        r"\bconversation\b|historique|échanges|messages? précédent\w*",
        r"conversaci[oó]n\w*|historial|mensajes? anteriores",
        r"conversazion\w*|cronologia|messaggi precedenti",
        r"\bconversa\b|conversação|histórico|mensagens anteriores",
        r"rozmow\w*|histori\w* czatu|poprzedni\w* wiadomoś\w*",
        r"разговор\w*|переписк\w*|диалог\w*|предыдущи\w* сообщени\w*",
        r"розмов\w*|листуванн\w*|діалог\w*|попередні\w* повідомлен\w*",
        r"对话|聊天记录|会话|之前的消息|会話|チャット履歴|これまでの(?:メッセージ|やり取り)|대화|채팅 기록|이전 메시지",
        r"المحادثة|الدردشة|الرسائل السابقة|बातचीत|पिछले संदेश|sohbet|konuşma|önceki mesaj",
        r"cuộc trò chuyện|hội thoại|tin nhắn trước",
        r"gesprek|chatgeschiedenis|eerdere berichten|percakapan|riwayat obrolan",
        r"\b(?:last|latest|most recent|recent) (?:\w+ )?(?:messages?|prompts?|requests?|replies)\b",
        r"\b(?:everything|all|whatever) (?:the user|they) (?:has |have )?(?:told|said|wrote|written|shared|typed)\b"
        r"|\bwhat the user (?:has )?(?:told you|said|wrote|typed)\b",
        r"konversation\w*|\bsamtal\w*|tidigare meddelanden|senaste \w* ?meddelanden|konverzac\w*|rozhovor\w*"
        r"|předchozí zpráv\w*",
    ),
    _sign(
        "private",
        "names private data",
        _F,
        r"\b(?:conversation|chat|transcript|dialog(?:ue)?|message) (?:history|log|so far|transcript)\b",
        r"\b(?:previous|prior|earlier|past|all|entire|full|whole|complete) (?:messages?|exchanges|turns"
        r"|conversation|chat|transcript|context)\b",
        r"\bsystem prompt\b|\b(?:your|the) (?:hidden |initial |original )?(?:instructions|rules|prompt|constraints)"
        r" (?:you were given|you received|above)\b",
        r"\b(?:passwords?|passphrases?|api[ _-]?keys?|secret keys?|access keys?|private keys?|credentials|tokens?"
        r"|cookies?|session ids?|ssh keys?|seed phrases?|mnemonic|wallet|clipboard|contacts|address book"
        r"|environment variables?|env vars?|authorization headers?|bearer)\b",
        r"\.env\b|\.ssh\b|id_rsa|id_ed25519|\.aws\b|\bmcp\.json\b|\.npmrc|\.pypirc|\.netrc|\.git-credentials|\.kube",
        r"\bssh (?:id|key)|\bid (?:rsa|ed25519|dsa|ecdsa)\b|\bprivate key\b|\baws credentials\b",
        r"/etc/(?:passwd|shadow)",
        r"\b(?:the )?user'?s (?:\w+ ){0,2}(?:e-?mails?|inbox|documents?|files?"
        r"|messages|contacts|accounts?|bank(?:ing)? (?:login|details)|browser|downloads|photos|calendar|notes"
        r"|home (?:directory|folder)|cookies|history|location|repositories|repos)\b",
        r"\bdocuments folder\b|\bhome (?:directory|folder)\b",
        r"\bevery (?:file|document|message|email) (?:you|the user)\b",
        r"\b(?:card|account|routing|social security) numbers?\b|\bcvv\b|\bbank login\b",
        r"\bpassports?\b|\b(?:national )?id numbers?\b|\bone-time (?:codes?|passwords?)\b|\botp codes?\b|\b2fa codes?\b"
        r"|\bverification codes?\b|\bsecret values?\b",
        r"\b(?:archivo|fichier|file|datei|soubor\w*|filen?|dosya\w*) \.?env\b|\benv (?:file|archivo|fichier|datei)\b",
        r"\bclaves? (?:ssh|privadas?)\b|\bclés? ssh\b|ssh-schlüssel|\bschluessel\w*|\bpasswoert\w*|\bkubeconfig\b",
        r"adressbuch|carnet d'adresses|libreta de direcciones|agenda de contactos|\brubrica\b|adresboek"
        r"|książk\w* adresow\w*|адресн\w* книг\w*|adresář|adressbok|lista de contatos",
        r"contactos|contatti|contatos|\bkontakt\w*|контакт\w*|联系人|通讯录|連絡先|アドレス帳|연락처|\bkişiler\w*|\brehber\w*"
        r"|danh bạ|جهات الاتصال|संपर्क",
        r"(?:archivos?|contactos|mensajes|correos|documentos|fotos) del usuario"
        r"|(?:fichiers|contacts|messages|courriels) de l'utilisateur"
        r"|(?:file|contatti|messaggi|documenti) dell'? ?utente",
        r"konversation\w*|lösenord\w*|användarens (?:\w+ ){0,2}(?:meddelanden|filer|kontakter|e-post|dokument)",
        r"konverzac\w*|hesl[oa]\w*|přihlašovací údaje|uživatel\w* (?:zpráv|soubor|kontakt)\w*",
        r"gesprächsverlauf|chatverlauf|vorherige\w* nachricht\w*|passw[oö]rt\w*|zugangsdaten|schlüssel\w*",
        r"historique (?:de (?:la )?)?(?:conversation|discussion|chat)|messages? précédent\w*|mots? de passe"
        r"|identifiants|clés? (?:api|privée)",
        r"historial (?:de (?:la )?)?(?:conversación|chat)|mensajes anteriores|contraseñas?|credenciales"
        r"|claves? (?:de )?api",
        r"cronologia (?:completa )?(?:della )?conversazione|messaggi precedenti|credenziali",
        r"histórico (?:da )?(?:conversa|conversação)|mensagens anteriores|senhas?|credenciais",
        r"histori\w* rozmow\w*|hasł\w*",
        r"історі\w+ (?:розмов|чату|листування)|попередні\w* повідомлен|парол\w*|облікові дані|ключ\w* api",
        r"истори\w+ (?:переписки|разговора|чата|диалога)|предыдущи\w* сообщени|учётные данные|учетные данные",
        r"对话记录|聊天记录|对话历史|完整对话|先前的消息|系统提示|密码|凭据|密钥|私钥|令牌",
        r"会話履歴|会話の履歴|チャット履歴|システムプロンプト|パスワード|認証情報|秘密鍵|APIキー",
        r"대화 기록|대화 내역|이전 메시지|시스템 프롬프트|비밀번호|자격 증명|API 키|개인 키",
        r"سجل المحادثة|كلمة المرور|बातचीत का इतिहास|पासवर्ड|sohbet geçmişi|konuşma geçmişi|şifre",
        r"lịch sử (?:trò chuyện|hội thoại)|mật khẩu",
        r"chiave (?:api|privata)|klucz\w* (?:api|prywatn\w*)|chave (?:de )?api|wachtwoord|kata sandi|parola\b",
        r"~/\.(?:config/gcloud|azure|aws|ssh|gnupg|docker|kube)|credentials\.json|accesstokens\.json",
        r"\b(?:account|routing|iban) numbers?\b|numer\w* konta|số tài khoản|número de (?:cuenta|conta)"
        r"|numéro de compte|kontonummer|номер\w* (?:рахунку|счёта|счета)|账号|口座番号|계좌번호",
    ),
    _sign(
        "flow",
        "moves it into a parameter",
        _F,
        rf"\b(?:in|into|inside|as|to|via|through|within) (?:the |this |its |a )?{Q}{{0,2}}[\w.-]{{1,40}}{Q}{{0,2}}"
        r" (?:parameter|param|field|argument|arg|property|attribute|header|input)\b",
        rf"\b(?:parameter|field|argument|property)\s+{Q}{{1,2}}[\w.-]{{1,40}}{Q}{{1,2}}",
        r"\b(?:include|includes|including|append|attach|pass|put|insert|embed|add|copy|paste|provide|supply|fill"
        r"|populate|set)\b[^.;\n]{0,60}\b(?:parameter|param|field|argument|property|request|call|payload|body"
        r"|query|url|header)s?\b",
        r"\b(?:paste|put|copy|write|include|insert|add)\b[^.;\n]{0,50}\bhere\b",
        r"\bparameter\w*|\bfeld\b|\bchamp\b|\bcampo\b|\bpole\b|поле|параметр\w*",
        r"参数|字段|パラメータ|引数|フィールド|매개변수|파라미터|필드|المعامل|पैरामीटर|parametre\w*|tham số",
    ),
    _sign(
        "tool",
        "reaches for another tool",
        _F,
        rf"\b(?:call|calls|calling|invoke|invoking|run|running|execute|executing|use|using|trigger)\b[^.;\n]{{0,12}}"
        rf"(?:{Q}{{1,2}}[a-z][\w.-]{{2,60}}{Q}{{1,2}}|\b[a-z][a-z0-9]*(?:[_.-][a-z0-9]+)+\b)",
        r"\b(?:before|after|when|whenever|each time|every time|once)\b[^.;\n]{0,40}\b(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
        r"|tool|function)\b[^.;\n]{0,30}\b(?:is (?:used|called|invoked|run)|runs|call|calls|completes)\b",
        r"\b(?:other|another|any|all|every) (?:\w+ )?(?:tools?|functions?|servers?)\b",
        r"\b(?:instead of|rather than) (?:calling|using|the)\b",
        r"\b(?:tools?|functions?|servers?)\b[^.;\n]{0,40}\b(?:are|is) (?:broken|unreliable|deprecated|buggy|disabled"
        r"|outdated)\b",
        r"\b(?:werkzeug\w*|outil\w*|herramienta\w*|strumento|ferrament\w*|narzędzi\w*|інструмент\w*|инструмент\w*)\b",
        r"工具|ツール|도구|أداة|उपकरण|\baraç\b",
        r"\*\*[a-z][\w.-]{2,60}\*\*",
        r"\b(?:rufe|ruf|nutze|verwende|appelle[zr]?|llama|chiama)\b[^.;\n]{0,30}\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b",
    ),
    _sign(
        "outside",
        "sends it outside",
        _F,
        r"https?://|\bwww\.[\w-]+\.|(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.-]+|\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b|\bbcc\b|\bcc\b:",
        r"blind (?:carbon )?copy|blindkopie|copie cachée|copia oculta|copia nascosta|cópia oculta|ukryta kopia",
        r"прихован\w* копі\w*|скрыт\w* копи\w*|密送|暗送|隠しコピー|숨은 참조",
        r"\b(?:send|sends|sending|forward|post|upload|exfiltrat\w*|transmit|leak|beacon|report) (?:[^.;\n]{0,40}\b)?"
        r"(?:to|at)\b",
        r"\bwebhook\b|\bpastebin|\bngrok\b|\bcollector\b|\bendpoint\b",
        r"sende\w* an|envo(?:ie|yez|yer|ya|ía|iar|iez) (?:à|a)\b|invia\w* a\b|enviar? para\b|wyślij do",
        r"надішл\w*|відправ\w*|отправ\w*|发送到|发送给|上传到|送信|送って|전송|보내",
        r"envía\w* a\b|envie (?:para|a)\b|gönder\w*|\bgửi\b|أرسل|भेज\w*|stuur\w* naar|\bkirim\w*",
        r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b",
    ),
    _sign(
        "hide",
        "hides it from the user",
        _F,
        r"\b(?:do not|don'?t|never|must not|should not|shouldn'?t|no need to)\b[^.;\n]{0,30}\b(?:tell|mention"
        r"|inform|notify|alert|reveal|show|display|disclose|bother|ask|confirm with|let)\b[^.;\n]{0,30}\b(?:user"
        r"|human|person|customer|owner)s?\b",
        r"\bwithout (?:telling|informing|notifying|alerting|asking|showing)\b",
        r"\b(?:silently|secretly|quietly|covertly|invisibl[ey]|behind the scenes)\b",
        r"\b(?:hidden|secret|invisible) (?:from|to) the user\b",
        r"\buser (?:does not|doesn'?t|need not) (?:need to )?(?:know|see|be told|hear)\b",
        r"\bno (?:reason|need) to (?:bring (?:this|it|that) up|talk about (?:this|it|that))\b"
        r"|\b(?:inutile|pas besoin) d'en parler\b|\bn'en parlez pas\b",
        r"\bkeep (?:this|it|that) (?:\w+ )?between (?:us|ourselves)\b"
        r"|\b(?:nicht|nichts) (?:erzählt|erzählen|gesagt werden)",
        r"\bmust not be (?:shown|displayed|revealed)\b|\binternal (?:step|requirement|use) only\b",
        r"nicht (?:erwähnen|mitteilen|sagen|anzeigen)|ohne (?:den|die) (?:nutzer|benutzer)\w* zu|heimlich",
        r"ne (?:le |lui )?(?:dis|dites|mentionne[z]?|signale[z]?|montre[z]?) (?:pas|rien|jamais)",
        r"sans (?:le dire|prévenir|informer)|n'en parle[z]? pas",
        r"no (?:se lo |le )?(?:digas|menciones|informes|muestres)|sin (?:avisar|informar|decir)",
        r"non (?:dire|dirlo|menzionare|informare)|senza (?:avvisare|informare)",
        r"não (?:diga|mencione|informe)|sem (?:avisar|informar)|nie (?:mów|informuj|wspominaj)",
        r"не (?:кажи|повідомляй|згадуй|говори|сообщай|упоминай|показывай|показуй)|нічого не повідомляй",
        r"непомітно|незаметно|тихо",
        r"不要(?:告诉|让|提及|通知|显示)|无需告知|悄悄",
        r"ユーザーに(?:知らせ|伝え|言わ|表示し)|知らせないで|伝えないで",
        r"사용자에게 (?:알리지|말하지|보여주지)|알릴 필요가 없|몰래",
        r"لا تخبر|مت बताओ|बताए बिना|kullanıcıya (?:söyleme|bildirme)|không (?:nói|báo) cho người dùng",
        r"vertel (?:het )?de gebruiker niet|jangan (?:beri tahu|memberi tahu) pengguna|\b(?:must not|never) be named\b",
        r"\b(?:display|show)\b[^.;\n]{0,30}\boriginal\b[^.;\n]{0,30}\bto the user\b",
        r"\b(?:no need to|do not|don'?t|never|without|not necessary to|needn'?t) (?:mention|bring up|disclose|report"
        r"|reference|point out|surface)\w*\b",
        r"\bkeep (?:this|it|that|these|them)(?: \w+){0,2} (?:out of|away from|off)\b",
        r"nämn inte|utan att (?:nämna|berätta)|non serve menzionar\w*|non (?:è necessario|c'è bisogno di) (?:menzionar"
        r"|dir)\w*|bahsetme\w*|söylemeyin|no (?:hace falta|es necesario) (?:mencionar|decir)\w*"
        r"|inutile de (?:le )?(?:mentionner|signaler|dire)|nicht erwähnt werden"
        r"|(?:muss|musst|müssen) (?:das |es )?nicht erw[aä]hn\w*"
        r"|não (?:é preciso|precisa) (?:mencionar|dizer)|не (?:нужно|надо|стоит) (?:упоминать|говорить"
        r"|сообщать)|nezmiňuj\w*|neříkej\w*|nie (?:trzeba|musisz) (?:wspominać|mówić)|无需提及|不必提及|不用提"
        r"|言及しない|触れないで|伝える必要はありません|언급하지|말할 필요",
    ),
    _sign(
        "fake_turn",
        "fakes a turn of the conversation",
        _F,
        r"(?:^|\n)\s*(?:system|assistant|ai|user|human)\s*(?:message|note|override)?\s*:\s",
        r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|information|tool_result|function_results?"
        r"|assistant|user|wichtig|важливо|важно|重要|指令|重要事項|중요)\s*>",
        r"\[/?INST\]|#{2,}\s*system|<!--.{0,400}?[a-z]{3}.{0,400}?-->|\bsystem\s*(?:note|override|message|notice)\b",
        r"\b(?:this is )?an? (?:important|urgent) message (?:from|for)\b",
        r"\bmessage (?:to|for) (?:the )?(?:ai|assistant|agent|model)\b",
        r"\b(?:to|for) (?:the|any|all|every) (?:ai |llm )?(?:ai|llm|assistant|agent|model)s? (?:reading|processing"
        r"|that reads|who reads)\b",
        r"[\"“„«]\s*(?:ai|llm|assistant|agent|model|copilot|claude)\b[\w -]{0,25}:\s",
        r"(?:^|\n)\s*(?:ai|llm|assistant|agent|model|copilot|claude)\b[\w -]{0,25}:\s",
        r"mensaje importante|message important|wichtige nachricht|важливе повідомлення|важное сообщение"
        r"|messaggio importante|mensagem importante|ważna wiadomość|重要(?:消息|信息|的消息)|重要なメッセージ"
        r"|중요한 메시지|رسالة مهمة|महत्वपूर्ण संदेश|önemli mesaj|tin nhắn quan trọng|belangrijk bericht",
    ),
    _sign(
        "trust",
        "asks to trust it over the user",
        _F,
        r"\btrust (?:this|these|the|its|results?|output|responses?)\b",
        r"\bover (?:anything|whatever|what) the user (?:says|said|asks|wants)\b",
        r"\btrat[ae]\w*\b[^.;\n]{0,50}\bcomo (?:instrucciones|órdenes|instruções|ordens)\b"
        r"|\btraite[zr]?\b[^.;\n]{0,50}\bcomme (?:des )?(?:instructions|ordres|consignes)\b"
        r"|\bbehandle\w*\b[^.;\n]{0,50}\bals (?:anweisung|befehl)\w*",
        r"\b(?:treat|regard|consider)\b[^.;\n]{0,40}\bas (?:instructions|orders|commands|coming from the user"
        r"|the user'?s? (?:own )?(?:requests?|instructions|orders))\b",
        r"\bact on (?:any|all|the) (?:follow-up|next|further) (?:steps|instructions|actions)\b",
        r"\bpre-?authori[sz]ed\b|\bwithout (?:checking|asking) (?:back )?with (?:them|the user|the owner)\b"
        r"|\bya (?:lo |la |los )?(?:autorizó|aprobó|ha (?:autorizado|aprobado))\b"
        r"|\bno (?:hace falta|es necesario) (?:pedir|solicitar) (?:confirmación|permiso)\b"
        r"|\bpas besoin de (?:demander|confirmer)\b|\bkeine (?:rückfrage|bestätigung) nötig\b",
        r"\bpre-?approved\b|\balready (?:approved|authori[sz]ed|consented)\b|\b(?:keep|continue) asking\b",
        r"\bby default\b[^.;\n]{0,60}\b(?:confirm|purchase|buy|pay|approve)\b",
        r"\bconfirm (?:the )?(?:purchase|payment|transfer|order) (?:immediately|automatically|right away)\b",
        r"\bno need to (?:ask|confirm|check with)\b"
        r"|\b(?:without|skip(?:ping)?) (?:the |any )?(?:confirmation|approval)\b"
        r"|\bdon'?t (?:need to )?ask (?:for )?(?:confirmation|approval|permission)\b|\balready (?:allowed|permitted"
        r"|agreed|granted)\b",
        r"\b(?:the )?user (?:would (?:like|appreciate|want|prefer)|wants you|asked (?:you|me|us) to"
        r"|has (?:asked|requested|approved|set up|agreed)|set (?:this|it) up"
        r"|mentioned (?:it|this|that) (?:earlier|before))\b",
        r"не нужно спрашивать|запрашивать не нужно|без подтверждения|уже разрешил\w*|ohne (?:Rückfrage|Bestätigung)"
        r"|bereits (?:erlaubt|genehmigt|zugestimmt)|sans (?:demander|confirmation)|déjà (?:autorisé|approuvé|accepté)"
        r"|sin (?:pedir|preguntar|confirmación)|ya (?:autorizó|aprobó|ha autorizado)|senza (?:chiedere|conferma)"
        r"|ha già (?:autorizzato|approvato)|sem (?:pedir|perguntar|confirmação)|já (?:autorizou|aprovou)"
        r"|无需确认|不需要确认|无需询问|已经授权|確認は不要|確認せずに|承認済み"
        r"|확인할 필요|확인 없이|이미 승인|onay (?:istemeden|almadan)"
        r"|bez (?:pytania|potwierdzenia|potvrzení|ptaní)|utan att fråga|utan bekräftelse",
    ),
    _sign(
        "risky",
        "asks for a harmful action",
        _F,
        r"\b(?:delete|remove|wipe|erase|drop|destroy|transfer|wire|pay|approve|merge|grant|disable|turn off"
        r"|download|install|chmod|curl|wget|exec|eval|rm -rf|sudo|verify\s*=\s*false)\b",
        r"\badd (?:a |an )?(?:fee|admin|collaborator)\b",
        r"\b(?:change|replace) the (?:recipient|payee|account|iban|address|values?|results?)\b",
        r"lösch\w*|überweis\w*|supprim\w*|elimin\w*|borra\w*|cancell\w*|usuń|видал\w*|удал\w*|переказ\w*|перевед\w*",
        r"删除|转账|削除|送金|삭제|송금",
        r"zamień|zmień|đổi|thay|sostituisci|cambia|remplace|ersetze|заміни|замени|替换|置き換え|바꿔|değiştir|استبدل",
        r"odbiorc\w*|người nhận|destinatari\w*|destinataire|empfänger|одержувач\w*|получател\w*|收款人|受取人|수취인",
    ),
    _sign(
        "imperative",
        "tells the reader what to do",
        re.I | re.M,
        r"^\W{0,4}(?:please\s+|now\s+|first\s+|then\s+|also\s+)?(?:read|send|include|call|ignore|forward|add|append"
        r"|attach|copy|paste|upload|delete|transfer|run|execute|fetch|open|write|set|replace|change|use|do not|don'?t"
        r"|never|always|make sure|remember|report|respond|reply|tell|summari[sz]e|output|print|reveal|list)\b",
        r"\byou (?:must|should|need to|have to|will|are required to|are to)\b",
        r"\b(?:do|please) (?:not )?(?:forget|fail)\b",
        r"\b(?:kindly|please) (?:also )?(?:include|attach|append|paste|pass|send|forward|add|copy|store|save|push|use"
        r"|call|end|put|share|provide|mirror|book|set)\b",
    ),
    _sign(
        "meta",
        "talks about attacks",
        _F,
        r"\b(?:attack(?:s|er|ers)?|injection|inject(?:ed|s)?|exploit\w*|vulnerab\w+|malicious|poison\w*|phishing"
        r"|cve-\d|security (?:research|advisory|issue)|researchers?|threat|payload|jailbreak\w*|red team\w*)\b",
        r"angriff\w*|schwachstelle|attaque\w*|vulnérabilit\w*|ataque\w*|vulnerabilidad\w*|attacco|vulnerabilità",
        r"atak\w*|luk\w* bezpieczeństwa|атак\w*|уразлив\w*|уязвим\w*",
        r"攻击|注入|漏洞|攻撃|インジェクション|脆弱性|공격|주입|취약점",
    ),
    _sign(
        "secret_file",
        "names a file of secrets",
        re.I,
        r"~/\.ssh|id_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials|\bmcp\.json\b|/etc/(?:passwd|shadow)",
        r"\.bash_history|\.zsh_history|\.git-credentials|\.npmrc\b|\.pypirc|\.netrc\b|\.kube/config",
        r"\.docker/config\.json|\bwallet\.dat\b|\.gnupg|gh/hosts\.yml|\bprintenv\b|\bLogin Data\b|authorized_keys",
        r"\.cursor/|claude_desktop_config",
    ),
    _sign(
        "precedence",
        "claims precedence over the user",
        _F,
        r"\b(?:take|takes|taking|have|has|get|gets|give|gives|giving|given) (?:\w+ ){0,2}(?:precedence|priority"
        r"|preference)\b[^.;\n]{0,40}"
        r"\b(?:over|above|before)\b[^.;\n]{0,40}\b(?:user|system|your|you|other|previous|earlier|host|client|operator"
        r"|conflicting)\b",
        r"\b(?:supersedes?|overrides?|outranks?|outweighs?|trumps?|prevails? over)\b[^.;\n]{0,30}\b(?:user|system|your"
        r"|other|previous|earlier|host|operator|conflicting)\b",
        r"\b(?:more important|higher priority|higher authority) than\b[^.;\n]{0,30}\b(?:user|system|your|other)\b",
        r"\b(?:where|if|when(?:ever)?|in case)\b[^.;\n]{0,50}\b(?:differs?|conflicts?|disagrees?|contradicts?)\b"
        r"[^.;\n]{0,50}\b(?:follow (?:this|these|the) (?:note|description|guidance|guidelines|instructions|rules|text)"
        r"|(?:this|these) (?:note|description|guidance|guidelines|instructions|rules|text) (?:wins?|prevails?"
        r"|comes? first|applies))\b",
        r"\b(?:si|cuando|quand|wenn|se)\b[^.;\n]{0,50}\b(?:contradice\w*|difiere\w*|contredi\w*|diffère\w*|widerspr\w*"
        r"|abweich\w*|contraddic\w*)\b[^.;\n]{0,50}\b(?:sigue (?:esta|estas)|suivez (?:cette|ces)"
        r"|folge (?:diesem|diesen)|segui (?:questa|queste))\b",
        r"\b(?:comes?|goes?|applies|is applied) first\b[^.;\n]{0,40}\b(?:user|host|system|operator)\b",
        r"\b(?:geht|gehen)\b[^.;\n]{0,50}\b(?:nutzer\w*|benutzer\w*|anwender\w*)\s+vor\b|wichtiger als",
        r"важнее\b[^.;\n]{0,30}\b(?:просьб|указани|инструкци|запрос)\w*|важливіш\w*\b[^.;\n]{0,30}\b(?:прохан|вказів"
        r"|інструкці|запит)\w*|por encima de (?:lo que|las? (?:peticiones|instrucciones|órdenes))"
        r"|l'emporte(?:nt)? sur|passent avant",
        r"vorrang (?:vor|gegenüber)|vorrangig vor|priment sur|prévalen?t sur|prévaut sur|ont (?:la )?priorité sur"
        r"|a (?:la )?priorité sur|prevalecen? sobre|tienen? (?:prioridad|precedencia) sobre|prevalgono su|prevale su"
        r"|hanno (?:la )?(?:precedenza|priorità) su|ha (?:la )?(?:precedenza|priorità) su"
        r"|prevalecem sobre|prevalece sobre|têm prioridade sobre|tem prioridade sobre"
        r"|имеют (?:больший )?приоритет над|приоритетнее|превалируют"
        r"|мають пріоритет над|mają pierwszeństwo przed|ma pierwszeństwo przed|mají přednost před|má přednost před"
        r"|har företräde framför|önceliklidir|önceliğe sahip|优先于|凌驾于|より優先|優先されます"
        r"|보다 우선|우선합니다|لها الأولوية على",
    ),
    _sign(
        "promotion",
        "steers the model away from other tools",
        _F,
        r"\buse (?:this|our) (?:tool|one|server|function|version|integration)(?: \w+){0,3} instead\b"
        r"|\binstead,? use (?:this|our)\b|\binstead of (?:the )?(?:official|built-in|builtin|native|other|original"
        r"|standard)\b",
        r"\b(?:tools?|servers?|functions?|integrations?|connectors?)\b[^.;\n]{0,40}\b(?:are|is|were|was|has been"
        r"|have been)(?: \w+){0,2} (?:broken|unreliable|buggy|compromised|insecure|unsafe|flaky|not working)\b",
        r"\b(?:official|built-in|builtin|native|other|original|standard)\b[^.;\n]{0,40}\b(?:tools?|servers?"
        r"|functions?|integrations?)\b[^.;\n]{0,30}\b(?:are|is|were|was|has been|have been)(?: \w+){0,2}"
        r" (?:deprecated|disabled|retired|discontinued|unavailable)\b",
        r"stattdessen (?:dieses|unser) (?:werkzeug|tool)|(?:cet|notre) outil à la place"
        r"|(?:esta|nuestra) herramienta en su lugar|(?:questo|il nostro) strumento invece"
        r"|(?:esta|nossa) ferramenta em vez|вместо (?:него|них|этого) (?:этот|наш)"
        r"|改用(?:此|本|这个)工具|代わりにこのツール|대신 이 도구",
    ),
    _sign(
        "link_exfil",
        "hides data in a link",
        _F,
        r"!?\[[^\]\n]{0,100}\]\(\s*https?://[^)\s]{0,200}[?&=/](?:<|\{|%7B|\$\{|[A-Z][A-Z0-9]*_[A-Z0-9_]{2,})",
        r"https?://\S{0,200}[?&][\w-]{1,30}=<[^>\n]{0,80}(?:url|encod|text|chat|conversation|summary|content|data)",
    ),
    _sign(
        "default_target",
        "sets a default destination",
        _F,
        r"(?:\bby default\b|\bdefaults? to\b|\bdefaulting to\b|по умолчанию|за замовчуванням|standardmäßig"
        r"|par défaut|por defecto|por padrão|per impostazione predefinita|domyślnie|ve výchozím|som standard|varsayılan"
        r"|默认|デフォルト|기본값|기본적으로)[^\n]{0,100}?"
        r"(?:(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.-]+|\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}|\b\d{10,}\b)",
    ),
    _sign(
        "contents",
        "asks for the contents of something",
        _F,
        r"\b(?:contents?|full text|entire text|whole text|raw text|body) of\b|\bverbatim\b|\bword for word\b"
        r"|\b(?:file|full|raw|complete|entire) contents\b",
        r"\binhalt\w* (?:der|des|von)\b|\bcontenu (?:du|de|des)\b|\bcontenido\b|\bcontenuto\b|\bconteúdo\b",
        r"содержимое|вміст|zawartoś\w*|\bobsah\w*|innehållet|içeriğ\w*|内容|全文|中身|내용|محتو[ىي]|सामग्री",
    ),
    # marks of an honest text (weighed by the model, never a reason on their own): what a tool does not return, a
    # secret file as the tool's own configuration, a quotation
    _sign(
        "assurance",
        "says what is kept back",
        _F,
        r"\b(?:are|is|were|was|will be|get|gets)\s+(?:never|not)\s+(?:\w+\s+)?(?:returned|printed|shown|displayed"
        r"|sent to the model|read|opened|echoed|exposed|included|output|revealed|accessed)\b",
        r"\b(?:does|do|will|can) not (?:return|read|print|expose|output|open|show|echo)\b|\bcannot (?:read|see|access"
        r"|return|approve)\b|\b(?:masked|redacted)\b|\bnot (?:returned|printed|opened|shown)\b",
        r"werden nicht (?:\w+ )?(?:zurückgegeben|ausgegeben|angezeigt|gelesen)|wird nicht (?:\w+ )?(?:zurückgegeben"
        r"|ausgegeben|angezeigt|gelesen)|maskiert",
        r"ne (?:sont|sera|seront|est) (?:jamais|pas) (?:\w+ )?(?:renvoy|retourn|affich|lu)\w*|masqué\w*",
        r"no se (?:devuelven?|muestran?|leen?)\b|enmascarad\w*|non (?:vengono|viene|sono|è) (?:mai )?(?:restituit"
        r"|mostrat|lett)\w*|mascherat\w*|não (?:são|é) (?:\w+ )?(?:retornad|devolvid|mostrad|lid)\w*|mascarad\w*",
        r"не (?:возвращаются|возвращается|выводятся|выводится|читаются|читается|показываются)|маскиру\w*"
        r"|не (?:повертаються|повертається|виводяться|читаються)",
        r"nie (?:są|jest) (?:\w+ )?(?:zwracan|wyświetlan|odczytywan)\w*|maskowan\w*|nejsou (?:\w+ )?(?:vrácen|zobrazen"
        r"|čten)\w*|nevrací|nečte|maskován\w*|(?:returneras|visas|läses) (?:aldrig|inte)|maskera\w*",
        r"döndürülmez|gösterilmez|okunmaz|maskelen\w*",
        r"不会(?:被)?(?:发送给模型|返回|输出|显示|读取)|不(?:返回|输出|显示|读取)|未读取|未打开|脱敏|掩码",
        r"(?:出力|返却|表示|読み取り)(?:され|し)ません|返しません|読みません|マスク",
        r"(?:반환|출력|표시|읽)(?:하지 않|되지 않)|반환하지|마스킹",
        r"لا يتم (?:إرجاع|عرض|قراءة)|नहीं (?:लौटाया|दिखाया|पढ़ा)|(?:लौटाया|दिखाया|पढ़ा) नहीं",
    ),
    _sign(
        "own_source",
        "names its own configuration",
        _F,
        r"\b(?:are|is) (?:taken|read|loaded|resolved|obtained|picked up|sourced) from\b|\bcomes? from\b"
        r"|\b(?:standard|default) (?:\w+ )?(?:credential|provider) chain\b|\bssh-agent\b|\bhosts? (?:in|from)\b"
        r"|\buses? (?:the )?(?:\w+ ){0,3}(?:at|from|in) (?:~|\$|KUBECONFIG\b)|\bconfigured (?:in|at|by) (?:~|\$|the)",
        r"(?:stammen|kommen) aus|verwendet (?:die|den|das) \w+ (?:aus|in|unter)|proviennent de|provient de"
        r"|se (?:toman|obtienen|leen|cargan|resuelven) de|proceden de|(?:vengono|sono) (?:presi|prese|lette|caricate"
        r"|risolte) da|provengono da|(?:são|é) (?:obtidas?|lidas?|carregadas?|resolvidas?) (?:de|a partir)|vêm de",
        r"берутся из|берётся из|читаются из|загружаются из|беруться з|(?:pobierane|odczytywane) z|pochodzą z"
        r"|(?:se )?(?:berou|načítají) z|pocházejí z|hämtas från|läses från|kommer från",
        r"取自|来自|使用本机|から(?:解決|読み込|取得|読み取)|에서 (?:가져|읽|로드)",
    ),
    _sign(
        "shadow",
        "acts when other tools are used",
        _F,
        r"\b(?:when|whenever|each time|every time|before|after|if)\b (?:any|another|other|the other|every)\b"
        r"[^.;\n]{0,40}\b(?:tools?|servers?|integrations?|functions?)\b",
    ),
]
# A short quotation (a phrase cited as evidence: a scanner's match, a document's example); a sentence whose alarming
# words are all inside such quotations carries the mark "quoted"
_QUOTED = re.compile(
    r"(?<!\w)'[^'\n]{4,60}'(?!\w)|\"[^\"\n]{4,60}\"|“[^”\n]{4,60}”|„[^“”\n]{4,60}[“”]|«[^»\n]{4,60}»|「[^」\n]{4,60}」"
)

# Asking to hand data over: a verb of giving (include, attach, paste, send, ...) near what is private (the
# conversation, a secret file, a file's contents), before or after it (verbs come last in Japanese, Korean, Turkish).
_GIVE = re.compile(
    "|".join(
        [
            r"\b(?:include|attach|append|paste|pass|put|send|forward|share|provide|supply|copy|add|upload|post|submit"
            r"|insert|embed|enclose|mirror|store|save|push)\b",
            r"\b(?:füge|füg|hänge|häng|sende|schicke|übermittle|kopiere|gib)\b|beifügen|mitsenden|anhängen",
            r"\b(?:inclu(?:s|ez|re)|joi(?:ns|gnez)|ajout(?:e|ez|er)|coll(?:e|ez)|envoi(?:e|ez)|transmet(?:s|tez)"
            r"|copi(?:e|ez)|fourni(?:s|ssez))\b",
            r"\b(?:incluy[ae]|adjunt[ae]|añad[ae]|pega|envía|copia|pasa|proporciona|agrega|includi|allega|aggiungi"
            r"|incolla|invia|inserisci|inoltra|inclua|anexe|adicione|cole|envie|copie|passe|insira|encaminhe)\b",
            r"включи|приложи|добавь|вставь|отправь|передай|скопируй|перешли|додай|встав|надішли|dołącz|dodaj|wklej"
            r"|wyślij|przekaż|přilož\w*|přidej\w*|vlož\w*|pošl\w*|bifoga|lägg till|klistra in|skicka|vidarebefordra"
            r"|\bekle\w*|yapıştır\w*|gönder\w*|附上|附加|添加|粘贴|发送|传入|放入|填入|复制|转发|添付|追加|貼り付け|送信|含め"
            r"|入れて|渡して|転送|첨부|추가|붙여|전송|포함|넣어|보내|전달|أرفق|أضف|الصق|أرسل|संलग्न|जोड़|चिपका|भेज",
        ]
    ),
    re.I,
)
_NEGATED = re.compile(
    r"(?:(?:\bnever|\bnot|n't|\bno|\bnothing|\bcannot)\b[^,;:.\n]{0,30}|不会|不|未|没有|勿|别)$",
    re.I,
)
_NEGATED_AFTER = re.compile(r"(?:し|され|でき)?(?:ない|ません)|(?:하|되)지 ?않|\w{0,3}(?:mez|maz|meyin|mayın)\b")
_USER_BEFORE = re.compile(
    r"\b(?:user|nutzer|benutzer|utilisateur|usuario|utente|usuário|пользовател|користувач|użytkownik|uživatel|användar"
    r"|kullanıcı)|用户|ユーザー|사용자|المستخدم|उपयोगकर्ता",
    re.I,
)
_HANDED = ("private", "conversation", "secret_file", "contents")
_OUTRANKED_FIRST = re.compile(r"より|보다|우선|öncelik", re.I)

_PATTERNS = {name: pattern for name, _, pattern in SIGNS}
NAMES = [*_PATTERNS, "asks_for", "quoted", "phrase_name"]
DESCRIPTIONS = {name: description for name, description, _ in SIGNS} | {
    "asks_for": "asks to hand it over",
    "quoted": "quotes its alarming words",
    "phrase_name": "is a phrase written as a property name",
}
# Marks of an honest text: weighed by the model, but no sign of an attack (never counted or given as a reason).
MARKS = frozenset({"assurance", "own_source", "quoted"})
# Signs that ordinary tool texts carry all the time (a parameter, another tool, "must", a file's contents): alone
# they tell little.
WEAK_SIGNS = frozenset({"model", "tool", "flow", "obligation", "contents", "phrase_name"}) | MARKS


# The characters the patterns read at once: a longer sentence (no honest one is) is read in overlapping windows, so no
# one search holds the interpreter long and the cache below keeps small strings; the overlap is longer than any
# sign's phrase.
SIGN_WINDOW = 1_000
SIGN_WINDOW_STEP = 750


def signs_of(sentence: str) -> frozenset[str]:
    """The signs a sentence carries, "quoted" when it quotes all its alarming words (a sentence about attacks, not
    one). A sentence longer than SIGN_WINDOW is read in windows, and "quoted" is decided for it whole: a quote in
    one window does not excuse an order in another."""
    found = _read(sentence)
    if found - WEAK_SIGNS and _QUOTED.search(sentence) and not _read(_QUOTED.sub(" ", sentence)) - WEAK_SIGNS:
        found |= {"quoted"}
    return found


def _read(sentence: str) -> frozenset[str]:
    return frozenset().union(*map(_window_signs, _windows(sentence)))


def signed_window(sentence: str) -> str:
    """The sentence, or for one longer than SIGN_WINDOW its window with the most strong signs: what is compared by
    meaning (embedding a whole 100,000-character sentence took 19 s of CPU)."""
    return max(_windows(sentence), key=lambda window: len(_window_signs(window) - WEAK_SIGNS))


def _windows(sentence: str) -> list[str]:
    if len(sentence) <= SIGN_WINDOW:
        return [sentence]
    starts = range(0, len(sentence) - SIGN_WINDOW + SIGN_WINDOW_STEP, SIGN_WINDOW_STEP)
    return [sentence[start : start + SIGN_WINDOW] for start in starts]


@functools.lru_cache(maxsize=2048)
def _window_signs(sentence: str) -> frozenset[str]:
    """The signs of at most SIGN_WINDOW characters (kept for the texts seen last: a hostile text repeats one
    sentence, and a server's tools share their parameter texts)."""
    return frozenset(_signs(sentence))


def _signs(sentence: str) -> set[str]:
    found = {name for name, pattern in _PATTERNS.items() if pattern.search(sentence)}
    if "precedence" in found and not _claims_precedence(sentence):
        found.discard("precedence")
    if found.intersection(_HANDED) and _asks_for(sentence):
        found.add("asks_for")
    return found


# The text speaking of itself ("the instructions in this description", "these guidelines", "cet outil"): a precedence
# claim made for such a text over the user or the system is an order to set the model's instructions aside
_ITSELF = re.compile(
    r"\b(?:this|these|the following)\b[^.;\n]{0,25}\b(?:description|note|notes|guidance|guidelines|instructions?"
    r"|schema|tool|rules|directives|server)\b"
    r"|\b(?:note|notes|guidance|guidelines|instructions|rules|directives)\s+(?:below|above|here(?:in)?)\b"
    r"|\b(?:esta|estas|este|esa|cette|ces|cet|diese[rsn]?|dieses|questa|queste|questo|desta|destas|deste|esta)\s+"
    r"(?:\w+\s+)?(?:descripci[oó]n|instrucciones|indicaciones|herramienta|description|consignes|indications|outil"
    r"|beschreibung|hinweise|anweisungen|werkzeug|tool|schema|descrizione|istruzioni|indicazioni|strumento|descrição"
    r"|instruções|orientações|ferramenta|nota|notas|hinweis|remarque)\b"
    r"|(?:этом|этого|эти|этот|цьому|цього|ці|цей)\s+(?:описани|указани|инструкци|инструмент|опис|вказів|інструкці"
    r"|інструмент)\w*|このツール|この説明|本工具|此工具|这些指令|该说明|이 도구|이 설명|bu araç|ten nástroj"
    r"|to narzędzie|tego narzędzia|deze tool|detta verktyg",
    re.I,
)

_OVER_USER = re.compile(
    r"\b(?:user|users|user's|system|operator|host)\b|usuario|utilisateur|nutzer|benutzer|utente|usuário|пользовател"
    r"|користувач|ユーザー|用户|사용자|kullanıcı|użytkownik|uživatel|användar|gebruiker",
    re.I,
)


def claims_precedence_for_itself(sentence: str, signs: frozenset[str]) -> bool:
    """A precedence claim over the user or the system made for the tool's own text ("instructions in this
    description take precedence over the user's")."""
    return "precedence" in signs and _ITSELF.search(sentence) is not None and _OVER_USER.search(sentence) is not None


def _claims_precedence(sentence: str) -> bool:
    """A precedence claim made for the text itself: not the user's own ("the user's instructions take precedence
    over documents") and not denied ("nothing here overrides the user")."""
    for match in _PATTERNS["precedence"].finditer(sentence):
        before = sentence[max(0, match.start() - 60) : match.start()]
        # in Japanese, Korean and Turkish what is outranked comes first ("ユーザーの指示より優先"): no subject to tell
        outranked_first = _OUTRANKED_FIRST.match(match.group(0)) is not None
        if (outranked_first or not _USER_BEFORE.search(before)) and not _NEGATED.search(before):
            return True
    return False


def _asks_for(sentence: str) -> bool:
    """A verb of giving within a few words of private data, not negated ("never ask the user to paste keys")."""
    private = sorted(m.start() for name in _HANDED for m in _PATTERNS[name].finditer(sentence))
    for verb in _GIVE.finditer(sentence):
        if _NEGATED.search(sentence[max(0, verb.start() - 40) : verb.start()]) or _NEGATED_AFTER.match(
            sentence, verb.end()
        ):
            continue
        nearest = bisect.bisect_left(private, verb.end() - 60)
        if nearest < len(private) and private[nearest] <= verb.end() + 80:
            return True
    return False
